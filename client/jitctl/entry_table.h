// The table of cache entries that `ls` and `evict` both print.
#pragma once

#include <google/protobuf/repeated_ptr_field.h>

#include <ostream>

#include "jitd/v1/cache_admin.pb.h"

namespace jitd::jitctl {

// KEY (first 16 hex digits; --json has the whole key), KERNEL, PARAMS, ARCH,
// SIZE, HITS, LAST USED and CREATED as ages, and PINNED.
void PrintEntryTable(std::ostream& out, const google::protobuf::RepeatedPtrField<v1::EntryInfo>& entries);

// The kernel glob of `--tree NAME` and `--kernel GLOB`: entries of a named
// tree are stored as "NAME/kernel", so --tree is the glob "NAME/GLOB" (GLOB
// "*" when not given); `glob` alone without a tree.
std::string KernelGlob(const std::string& tree, const std::string& glob);

}  // namespace jitd::jitctl
