// Every enum's name, and the parsers of the names users write (environment, tuning files): one
// place, so that a name is spelled the same in logs, plan reasons, tuning files and the docs.
#pragma once

#include "arfusion/arfusion.h"
#include "topology.h"

namespace arfusion::detail {

const char* toString(LinkType link);
bool parseStrategy(const char* text, Strategy* out);  // auto|oneshot|twoshot|nccl
bool parseSyncMode(const char* text, SyncMode* out);  // auto|griddep|flag

}  // namespace arfusion::detail
