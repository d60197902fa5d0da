// The flag shared by the commands that chat (`chat`, `serve`): --chat-template.
#pragma once

#include "cli/flag_table.h"

namespace kvserve {

// --chat-template NAME, with the names ChatTemplate::ByName accepts.
Flag ChatTemplateFlag();

}  // namespace kvserve
