// jitd::Progress, the progress line of long work, is part of jitd_base
// (jitd/base/progress.h); this header keeps the client's include path.
#pragma once

#include "jitd/base/progress.h"
