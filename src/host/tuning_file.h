// Tuning files: an Auto table measured on the user's machine (arfusion-tune), format in tuning_file.cpp.
#pragma once

#include <string>

#include "auto_table.h"

namespace arfusion::detail {

// Reads a tuning file. Rejects, with a message, a file that does not parse or was measured for
// another arch, link or world size than `topo`.
Status loadTuningFile(const char* path, const Topology& topo, AutoTable* out);
// The same from text (tests); `source` names it in messages.
Status parseTuning(const std::string& text, const std::string& source, const Topology& topo, AutoTable* out);
std::string formatTuning(const Topology& topo, const AutoTable& table);

}  // namespace arfusion::detail
