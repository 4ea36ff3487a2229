// What the library does to the process a node runs in, before the node's first line of log or
// its first error: errors that the program does not catch end it with one line and a
// documented exit code, and glog writes to stderr without its "before InitGoogleLogging" note.
#ifndef PS_UTIL_PROCESS_SETUP_H_
#define PS_UTIL_PROCESS_SETUP_H_

namespace ps {

// Chains a std::terminate handler (once per process): a ps::Error that nothing caught prints
// "ps: <its code>: <its message>" and exits with ExitCodeOf(code); anything else goes to the
// handler that was there before (the C++ runtime's: "terminate called ...", abort).
void ExitOnUncaughtError();

// Initialises glog when the program has not (logging to stderr, as before initialisation,
// unless GLOG_* variables say otherwise). A program that uses glog itself calls
// InitGoogleLogging before it constructs a Node.
void InitLoggingOnce();

}  // namespace ps

#endif  // PS_UTIL_PROCESS_SETUP_H_
