// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// How core/hardware.hpp reads one core's cache sizes from Linux's sysfs
/// (/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}).

#include <cstddef>
#include <cstdio>

#include "../config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace detail {

#if defined(__linux__)
/// Reads file `name` of cache `index` of CPU 0 in sysfs with `format` into `out...`: -1 when the
/// file cannot be opened, else 1 when a field was read and 0 when none was.
template <class... Out>
int read_cache_field(int index, const char* name, const char* format, Out*... out) noexcept {
    char path[96];
    std::snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index, name);
    std::FILE* f = std::fopen(path, "r");
    if (f == nullptr) {
        return -1;
    }
    const int read = std::fscanf(f, format, out...);
    std::fclose(f);
    return read >= 1 ? 1 : 0;
}

/// One core's cache at `level` as sysfs describes it, or 0. sysfs describes the cache a core sees
/// (sysconf has reported the whole L3 of a many-core package as one core's on virtual machines).
inline std::size_t sysfs_cache_bytes(int level) noexcept {
    for (int index = 0; index < 8; ++index) {
        int found = 0;
        const int level_read = read_cache_field(index, "level", "%d", &found);
        if (level_read < 0) {
            break;  // no cache of that index: the list is over
        }
        char type[32] = {};
        if (level_read == 0 || found != level || read_cache_field(index, "type", "%31s", type) != 1 ||
            type[0] == 'I') {  // "Data" or "Unified", not "Instruction"
            continue;
        }
        unsigned long long size = 0;
        char unit = 0;
        if (read_cache_field(index, "size", "%llu%c", &size, &unit) == 1 && size > 0) {
            return static_cast<std::size_t>(size) * (unit == 'K' ? 1024u : unit == 'M' ? 1024u * 1024u : 1u);
        }
    }
    return 0;
}
#endif

}  // namespace detail

SYNCBLOB_END_NAMESPACE
