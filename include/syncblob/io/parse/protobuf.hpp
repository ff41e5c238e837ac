// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// A small reader and writer of the protobuf wire format: varints, 32- and 64-bit fixed values,
/// length-delimited fields (packed repeated fields, strings, nested messages). Every read is
/// bounds-checked, varints are overflow-checked, nesting is depth-limited, and every error is a
/// `FormatError` naming the input, the byte offset, the field and what was expected.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "../detail/format_error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::parse::protobuf {

/// The wire types of the protobuf encoding (3 and 4 are the deprecated groups).
enum class WireType : std::uint8_t {
    varint = 0,
    fixed64 = 1,
    length_delimited = 2,
    start_group = 3,
    end_group = 4,
    fixed32 = 5
};

/// How deeply groups of unknown fields may nest before the input is refused (protobuf's own limit).
inline constexpr int max_depth = 100;
/// The largest field number protobuf allows.
inline constexpr std::uint64_t max_field_number = (std::uint64_t{1} << 29) - 1;

[[nodiscard]] constexpr std::string_view wire_type_name(WireType t) noexcept {
    switch (t) {
        case WireType::varint:
            return "varint (0)";
        case WireType::fixed64:
            return "64-bit (1)";
        case WireType::length_delimited:
            return "length-delimited (2)";
        case WireType::start_group:
            return "start-group (3)";
        case WireType::end_group:
            return "end-group (4)";
        case WireType::fixed32:
            return "32-bit (5)";
    }
    return "?";
}

/// One field as read from the wire. `offset` is the absolute offset of its tag in the input.
struct Field {
    std::uint32_t number = 0;
    WireType type = WireType::varint;
    std::size_t offset = 0;
    /// The value of a varint, 64-bit or 32-bit field.
    std::uint64_t value = 0;
    /// The payload of a length-delimited field, and the absolute offset where it starts.
    std::string_view bytes;
    std::size_t bytes_offset = 0;
};

/// Reads the fields of one message in order. `base` is the absolute offset of `data` in the whole
/// input, so error messages give offsets into the file; `source` names the input.
class Reader {
public:
    /// Names the known fields of a message in error messages ("data" for 5), or "" for unknown ones.
    using FieldNamer = std::string_view (*)(std::uint32_t number) noexcept;

    Reader(std::string_view data, std::size_t base, std::string_view source, std::string_view message,
           FieldNamer namer = nullptr) noexcept
        : data_(data), base_(base), source_(source), message_(message), namer_(namer) {}

    /// Reads the next field into `f`; false at the end of the message.
    bool next(Field& f) {
        if (pos_ == data_.size()) {
            return false;
        }
        f.offset = base_ + pos_;
        const std::uint64_t tag = varint("field tag");
        const std::uint64_t number = tag >> 3;
        const auto type = static_cast<unsigned>(tag & 7u);
        if (number == 0 || number > max_field_number) {
            fail_at(f.offset, "field tag", "field number " + std::to_string(number) + " outside [1, 2^29 - 1]");
        }
        f.number = static_cast<std::uint32_t>(number);
        f.type = static_cast<WireType>(type);
        f.value = 0;
        f.bytes = {};
        switch (type) {
            case 0:
                f.value = varint("varint value");
                break;
            case 1:
                f.value = fixed(8);
                break;
            case 5:
                f.value = fixed(4);
                break;
            case 2: {
                const std::uint64_t length = varint("length");
                if (length > data_.size() - pos_) {
                    fail_at(f.offset, field_name(f.number),
                            "length " + std::to_string(length) + " runs past the end of the " + std::string(message_) +
                                " (" + std::to_string(data_.size() - pos_) + " bytes left)");
                }
                f.bytes = data_.substr(pos_, static_cast<std::size_t>(length));
                f.bytes_offset = base_ + pos_;
                pos_ += static_cast<std::size_t>(length);
                break;
            }
            case 3:
                skip_group(f.number, f.offset, 1);
                break;
            default:
                fail_at(f.offset, field_name(f.number),
                        "wire type " + std::to_string(type) + " is not a protobuf wire type (expected 0, 1, 2 or 5)");
        }
        return true;
    }

    /// The absolute offset of the next unread byte.
    [[nodiscard]] std::size_t offset() const noexcept { return base_ + pos_; }
    [[nodiscard]] std::string_view source() const noexcept { return source_; }
    [[nodiscard]] std::string_view message() const noexcept { return message_; }

    /// "BlobProto.data (field 5)", or "BlobProto field 12" for a field the namer does not know.
    [[nodiscard]] std::string field_name(std::uint32_t number) const {
        const std::string_view name = namer_ != nullptr ? namer_(number) : std::string_view{};
        if (name.empty()) {
            return std::string(message_) + " field " + std::to_string(number);
        }
        return std::string(message_) + "." + std::string(name) + " (field " + std::to_string(number) + ")";
    }

    /// Throws FormatError "<source>: offset <o>, <where>: <what>".
    [[noreturn]] void fail_at(std::size_t offset, std::string_view where, std::string_view what) const {
        io::throw_format_error(source_, "offset " + std::to_string(offset) + ", " + std::string(where), what);
    }

private:
    std::uint64_t varint(std::string_view what) {
        const std::size_t start = pos_;
        std::uint64_t result = 0;
        for (unsigned shift = 0; shift < 64; shift += 7) {
            if (pos_ == data_.size()) {
                fail_at(base_ + start, std::string(message_) + " " + std::string(what),
                        "truncated varint (the " + std::string(message_) + " ends inside it)");
            }
            const auto byte = static_cast<std::uint8_t>(data_[pos_++]);
            if (shift == 63 && byte > 1) {
                fail_at(base_ + start, std::string(message_) + " " + std::string(what),
                        "varint overflows 64 bits (10th byte " + std::to_string(byte) + ", expected 0 or 1)");
            }
            result |= std::uint64_t{byte & 0x7Fu} << shift;
            if ((byte & 0x80u) == 0) {
                return result;
            }
        }
        return result;  // unreachable: the 10th byte is 0 or 1 and ends the loop
    }

    std::uint64_t fixed(std::size_t n) {
        if (data_.size() - pos_ < n) {
            fail_at(base_ + pos_, std::string(message_) + " " + std::to_string(n * 8) + "-bit value",
                    "needs " + std::to_string(n) + " bytes, " + std::to_string(data_.size() - pos_) + " left");
        }
        unsigned char b[8] = {};
        std::memcpy(b, data_.data() + pos_, n);
        pos_ += n;
        std::uint64_t v = 0;
        for (std::size_t i = n; i-- > 0;) {
            v = (v << 8) | b[i];
        }
        return v;
    }

    // Skips a group of unknown fields up to its end-group tag (protobuf readers must skip them).
    void skip_group(std::uint32_t number, std::size_t start, int depth) {
        if (depth > max_depth) {
            fail_at(start, field_name(number), "groups nest deeper than " + std::to_string(max_depth));
        }
        for (;;) {
            if (pos_ == data_.size()) {
                fail_at(start, field_name(number),
                        "group has no end-group tag before the end of the " + std::string(message_));
            }
            const std::size_t tag_offset = base_ + pos_;
            const std::uint64_t tag = varint("field tag");
            const std::uint64_t inner = tag >> 3;
            const auto type = static_cast<unsigned>(tag & 7u);
            if (inner == 0 || inner > max_field_number) {
                fail_at(tag_offset, "field tag", "field number " + std::to_string(inner) + " outside [1, 2^29 - 1]");
            }
            switch (type) {
                case 0:
                    (void)varint("varint value");
                    break;
                case 1:
                    (void)fixed(8);
                    break;
                case 5:
                    (void)fixed(4);
                    break;
                case 2: {
                    const std::uint64_t length = varint("length");
                    if (length > data_.size() - pos_) {
                        fail_at(
                            tag_offset, field_name(static_cast<std::uint32_t>(inner)),
                            "length " + std::to_string(length) + " runs past the end of the " + std::string(message_));
                    }
                    pos_ += static_cast<std::size_t>(length);
                    break;
                }
                case 3:
                    skip_group(static_cast<std::uint32_t>(inner), tag_offset, depth + 1);
                    break;
                case 4:
                    if (inner != number) {
                        fail_at(tag_offset, field_name(static_cast<std::uint32_t>(inner)),
                                "end-group tag does not match the group of field " + std::to_string(number));
                    }
                    return;
                default:
                    fail_at(tag_offset, field_name(static_cast<std::uint32_t>(inner)),
                            "wire type " + std::to_string(type) + " is not a protobuf wire type");
            }
        }
    }

    std::string_view data_;
    std::size_t pos_ = 0;
    std::size_t base_;
    std::string_view source_;
    std::string_view message_;
    FieldNamer namer_;
};

/// Reads the varints of a packed repeated field, calling `fn(value, absolute_offset)` for each.
template <class Fn>
void for_each_packed_varint(const Reader& r, const Field& f, std::string_view name, Fn&& fn) {
    const std::string_view b = f.bytes;
    std::size_t pos = 0;
    while (pos < b.size()) {
        const std::size_t start = pos;
        std::uint64_t result = 0;
        for (unsigned shift = 0;; shift += 7) {
            if (pos == b.size()) {
                r.fail_at(f.bytes_offset + start, name, "truncated varint at the end of the packed field");
            }
            const auto byte = static_cast<std::uint8_t>(b[pos++]);
            if (shift == 63 && byte > 1) {
                r.fail_at(f.bytes_offset + start, name, "varint overflows 64 bits");
            }
            result |= std::uint64_t{byte & 0x7Fu} << shift;
            if ((byte & 0x80u) == 0) {
                break;
            }
        }
        fn(result, f.bytes_offset + start);
    }
}

/// Little-endian loads and stores of floats and doubles (any alignment, any host byte order).
template <class F>
[[nodiscard]] F load_le(const char* p) noexcept {
    static_assert(sizeof(F) == 4 || sizeof(F) == 8);
    using U = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
    U u;
    std::memcpy(&u, p, sizeof(U));
    if constexpr (std::endian::native == std::endian::big) {
        u = sizeof(U) == 4 ? static_cast<U>(__builtin_bswap32(static_cast<std::uint32_t>(u)))
                           : static_cast<U>(__builtin_bswap64(static_cast<std::uint64_t>(u)));
    }
    return std::bit_cast<F>(u);
}

// ---- writing -------------------------------------------------------------------------------

/// Bytes a varint of `v` takes (1 to 10).
[[nodiscard]] constexpr std::size_t varint_size(std::uint64_t v) noexcept {
    std::size_t n = 1;
    while (v >= 0x80u) {
        v >>= 7;
        ++n;
    }
    return n;
}

/// Bytes a tag takes.
[[nodiscard]] constexpr std::size_t tag_size(std::uint32_t number) noexcept {
    return varint_size(std::uint64_t{number} << 3);
}

/// Writes protobuf fields to a sink with `write(const void*, std::size_t)` (a `FileWriter` or a
/// string appender). Length-delimited fields take their length up front, so nothing is buffered.
template <class Sink>
class Writer {
public:
    explicit Writer(Sink& sink) noexcept : sink_(sink) {}

    void varint(std::uint64_t v) {
        unsigned char buf[10];
        std::size_t n = 0;
        while (v >= 0x80u) {
            buf[n++] = static_cast<unsigned char>(v | 0x80u);
            v >>= 7;
        }
        buf[n++] = static_cast<unsigned char>(v);
        sink_.write(buf, n);
    }
    void tag(std::uint32_t number, WireType type) {
        varint((std::uint64_t{number} << 3) | static_cast<unsigned>(type));
    }
    /// The tag and length of a length-delimited field whose payload follows.
    void length_delimited(std::uint32_t number, std::uint64_t length) {
        tag(number, WireType::length_delimited);
        varint(length);
    }
    void string_field(std::uint32_t number, std::string_view s) {
        length_delimited(number, s.size());
        sink_.write(s.data(), s.size());
    }
    /// A packed repeated float or double field (omitted when empty, as protobuf does).
    template <class F>
    void packed_fixed(std::uint32_t number, const F* values, std::size_t n) {
        static_assert(sizeof(F) == 4 || sizeof(F) == 8);
        if (n == 0) {
            return;
        }
        length_delimited(number, std::uint64_t{n} * sizeof(F));
        if constexpr (std::endian::native == std::endian::little) {
            sink_.write(values, n * sizeof(F));
        } else {
            for (std::size_t i = 0; i < n; ++i) {
                using U = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
                U u = std::bit_cast<U>(values[i]);
                u = sizeof(U) == 4 ? static_cast<U>(__builtin_bswap32(static_cast<std::uint32_t>(u)))
                                   : static_cast<U>(__builtin_bswap64(static_cast<std::uint64_t>(u)));
                sink_.write(&u, sizeof(U));
            }
        }
    }

private:
    Sink& sink_;
};

/// A sink appending to a string (for in-memory serialization).
struct StringSink {
    std::string& out;
    void write(const void* data, std::size_t n) { out.append(static_cast<const char*>(data), n); }
};

}  // namespace io::parse::protobuf

SYNCBLOB_END_NAMESPACE
