// PlanParts is a template (header only); this file keeps the build list stable.
#include "kv/slicer.h"
