// The roles of a distributed ps_lda run.
#ifndef PS_APPS_LDA_WORKER_H_
#define PS_APPS_LDA_WORKER_H_

#include "lda/lda.h"

namespace lda {

/// Serves the count tables until the job ends.
void RunServer(ps::Node* node, const Options& o);
/// Trains on the data parts this worker takes from the scheduler; worker 0 reports progress,
/// evaluates, prints the topics and writes the model. Returns the process exit code.
int RunWorker(ps::Node* node, const Options& o);

}  // namespace lda

#endif  // PS_APPS_LDA_WORKER_H_
