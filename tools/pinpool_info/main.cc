// pinpool-info: is this machine ready for pinned, registered memory, and what should change?
// See info.h for how the tool is put together and `pinpool-info --help` for its use.
// Exit status: 0 whatever it found (the report says what is wrong), 2 for bad arguments; with
// --metrics, 1 when the running pool's metrics cannot be read.
#include <cstdio>
#include <string>

#include "info.h"
#include "pinpool/version.h"

int main(int argc, char** argv) {
  std::string error;
  bool help = false;
  bool version = false;
  const auto options = pinpool::info::ParseArguments(argc, argv, error, help, version);
  if (!options) {
    std::fprintf(stderr, "pinpool-info: %s\n(pinpool-info --help for usage)\n", error.c_str());
    return 2;
  }
  if (help) {
    std::fputs(pinpool::info::UsageText().c_str(), stdout);
    return 0;
  }
  if (version) {
    std::printf("pinpool-info %s\n", PINPOOL_VERSION_STRING);
    return 0;
  }
  if (!options->metrics_socket.empty()) {
    const std::optional<std::string> text =
        pinpool::info::ReadMetrics(options->metrics_socket, error);
    if (!text) {
      std::fprintf(stderr, "pinpool-info: %s\n", error.c_str());
      return 1;
    }
    std::fputs(text->c_str(), stdout);
    return 0;
  }
  const pinpool::info::Facts facts = pinpool::info::ProbeAll();
  const pinpool::info::PoolPlan plan = pinpool::info::PlanPool(*options, facts);
  const std::vector<pinpool::info::Finding> findings = pinpool::info::FindProblems(facts, plan);
  const std::string out = options->json ? pinpool::info::RenderJson(facts, plan, findings)
                                        : pinpool::info::RenderText(facts, plan, findings);
  std::fputs(out.c_str(), stdout);
  return 0;
}
