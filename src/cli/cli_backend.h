// The backend every command runs on, chosen by name from the registry (kernels/backend_registry.h):
// `--backend NAME`, else KVSERVE_BACKEND, else "cpu". Each backend reads its own settings from
// the environment when it is built (the CPU: KVSERVE_ISA, KVSERVE_PACK, KVSERVE_DECODE_TILE,
// KVSERVE_DELTA_CHUNK; a GPU backend: KVSERVE_DEVICE, which `--device N` sets).
#pragma once

#include "cli/args.h"
#include "cli/flag_table.h"
#include "kernels/backend.h"
#include "util/status.h"

namespace kvserve {

// --backend NAME, for the flag groups of the commands that run kernels.
Flag BackendFlag();
// --device N: which device of a GPU backend (`kvserve doctor` lists them); sets KVSERVE_DEVICE,
// which the backend reads when it is built. Beside BackendFlag() in every table that has it.
Flag DeviceFlag();

// The backend `--backend` names in args (else the default), built on first use and kept until
// exit; an unknown name is an error naming the flag and the backends this build has.
Result<const Backend*> CliBackend(const Args& args);

// The default backend (KVSERVE_BACKEND, else "cpu"). An unknown KVSERVE_BACKEND is reported and
// the process exits with status 2.
const Backend& CliBackend();

}  // namespace kvserve
