// --help for the bundled apps: the app's own flags first and alone. gflags' --help lists every
// flag of every linked file by file name, which put a hundred lines of glog's flags before the
// app's; those stay under --helpfull.
#ifndef PS_APPS_APP_HELP_H_
#define PS_APPS_APP_HELP_H_

#include <gflags/gflags.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace apps {

/// When argv asks for help (--help, -help, -h), prints the usage message and the flags defined
/// in files under `dir` (such as "apps/linear/"), then exits 0. Call after
/// gflags::SetUsageMessage and before gflags::ParseCommandLineFlags.
inline void HandleHelp(int argc, char** argv, const char* dir) {
  bool help = false;
  for (int i = 1; i < argc; ++i) {
    help |= !std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-help") ||
            !std::strcmp(argv[i], "-h");
  }
  if (!help) return;
  const char* slash = std::strrchr(argv[0], '/');
  std::printf("%s\n\n%s flags:\n", gflags::ProgramUsage(), slash ? slash + 1 : argv[0]);
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  for (const auto& f : flags) {
    if (f.filename.find(dir) != std::string::npos) {
      std::printf("%s", gflags::DescribeOneFlag(f).c_str());
    }
  }
  std::printf(
      "\nThe job's own settings are PS_* environment variables (docs/operations.md); logging "
      "flags (glog) are listed by --helpfull.\n");
  std::exit(0);
}

}  // namespace apps

#endif  // PS_APPS_APP_HELP_H_
