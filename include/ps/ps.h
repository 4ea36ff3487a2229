// Everything a training program needs: #include "ps/ps.h".
#ifndef PS_PS_H_
#define PS_PS_H_

#include "ps/base.h"
#include "ps/config.h"
#include "ps/kv_server.h"
#include "ps/kv_worker.h"
#include "ps/node.h"
#include "ps/sarray.h"
#include "ps/table.h"
#include "ps/update_rule.h"

#endif  // PS_PS_H_
