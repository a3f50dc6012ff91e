// Links the public API and calls what needs no GPU: names, versions, argument checks.
#include <arfusion/arfusion.h>

#include <cstdio>
#include <cstring>

int main() {
  using namespace arfusion;
  const Status st = allReduce(nullptr, nullptr, nullptr, 1, 1, DType::kBFloat16, nullptr);
  std::printf("arfusion %d.%d.%d: %s (%s), %s\n", ARFUSION_VERSION_MAJOR, ARFUSION_VERSION_MINOR, ARFUSION_VERSION_PATCH,
              statusString(st), lastError(), toString(Strategy::kAuto));
  return st == Status::kInvalidArgument && std::strlen(lastError()) > 0 ? 0 : 1;
}
