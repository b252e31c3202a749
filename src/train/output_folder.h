// What a run checks and tidies in --outf before it writes there.
#pragma once
#include "ganengine/train_loop.h"

namespace ge {

// Refuses an --outf that holds another run's training state (a new run would overwrite it
// epoch by epoch), unless --resume continues that very state or --overwrite is given; then
// removes the temporaries a killed run left there (atomic_file.h), naming them.
void prepare_output_folder(const TrainOptions& opt);

}  // namespace ge
