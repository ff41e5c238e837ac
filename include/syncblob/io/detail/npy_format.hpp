// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The `.npy` header: a strict parser of the Python dict literal NumPy writes (no evaluation:
/// exactly the keys 'descr', 'fortran_order' and 'shape', each once) and the writer of the same
/// text, laid out as NumPy 1.24 lays it out.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../../core/element.hpp"
#include "../../core/shape.hpp"
#include "format_error.hpp"

SYNCBLOB_BEGIN_NAMESPACE

namespace io::detail {

/// What a `.npy` header says.
struct NpyHeader {
    int major = 1;
    int minor = 0;
    Dtype dtype = Dtype::F32;
    bool big_endian = false;
    std::vector<std::int64_t> shape;
    std::uint64_t data_offset = 0;  ///< where the array data begins
    std::uint64_t count = 0;        ///< product of the extents
    std::uint64_t data_bytes = 0;   ///< count × item size
};

inline constexpr std::string_view npy_magic = "\x93NUMPY";
/// The longest header accepted (NumPy's own headers are ~128 bytes; 32 axes need < 1 KiB).
inline constexpr std::uint32_t npy_max_header = 1u << 20;

/// The `descr` NumPy writes for a dtype: the byte order ('|' for one-byte types, '<' for the rest)
/// and the element table's NumPy code. bfloat16 has no NumPy dtype: it is written as 2-byte raw
/// values ('<V2'), which NumPy loads as void and `view`s as uint16 or ml_dtypes.bfloat16. Empty for
/// a dtype NumPy has no standard descriptor for (the 8-bit floats: ml_dtypes' types are no part of
/// NumPy's format).
[[nodiscard]] inline std::string npy_descr(Dtype d) {
    const DtypeInfo* row = dtype_info(d);
    if (row == nullptr || row->numpy_code.empty()) {
        return {};
    }
    return (row->size == 1 ? "|" : "<") + std::string(row->numpy_code);
}

/// The dtype whose NumPy code (a `descr` without its byte order) is `code`, or nothing.
[[nodiscard]] constexpr std::optional<Dtype> npy_dtype(std::string_view code) noexcept {
    for (const DtypeInfo& row : dtype_table) {
        if (!row.numpy_code.empty() && row.numpy_code == code) {
            return row.dtype;
        }
    }
    return std::nullopt;
}

/// The NumPy codes syncblob reads, for messages: "f8 f4 f2 V2 i8 … b1".
[[nodiscard]] inline std::string npy_codes() {
    std::string out;
    for (const DtypeInfo& row : dtype_table) {
        if (!row.numpy_code.empty()) {
            out.append(out.empty() ? "" : " ").append(row.numpy_code);
        }
    }
    return out;
}

/// The header text (dict, padding, newline) and its prefix for an array of `shape` and `dtype`,
/// as NumPy 1.24's `np.save` writes it: version 1.0 unless the header needs more than 65535 bytes.
[[nodiscard]] inline std::string npy_header_bytes(Dtype dtype, std::span<const std::int64_t> shape) {
    std::string dict = "{'descr': '" + npy_descr(dtype) + "', 'fortran_order': False, 'shape': (";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        dict += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
    }
    dict += shape.size() == 1 ? ",), }" : "), }";
    if (!shape.empty()) {  // NumPy leaves room to grow the first extent in place (21 digits)
        const std::size_t digits = std::to_string(shape[0]).size();
        dict.append(digits < 21 ? 21 - digits : 0, ' ');
    }
    const auto build = [&](int major) {
        const std::size_t prefix = 6 + 2 + (major == 1 ? 2 : 4);
        const std::size_t unpadded = prefix + dict.size() + 1;
        const std::size_t pad = 64 - unpadded % 64;  // NumPy pads 1..64 bytes, never 0
        const std::size_t length = dict.size() + pad + 1;
        std::string out(npy_magic);
        out += static_cast<char>(major);
        out += '\0';
        for (std::size_t b = 0; b < (major == 1 ? 2u : 4u); ++b) {
            out += static_cast<char>((length >> (8 * b)) & 0xFF);
        }
        out += dict;
        out.append(pad, ' ');
        out += '\n';
        return out;
    };
    std::string v1 = build(1);
    return v1.size() - 10 <= 0xFFFF ? v1 : build(2);
}

/// Parses the header dict of a `.npy` file. `text` is the header (after the length field) and
/// `base` its offset in the file, so messages name file offsets.
class NpyDictParser {
public:
    NpyDictParser(std::string_view text, std::uint64_t base, std::string_view source)
        : text_(text), base_(base), source_(source) {}

    void parse(NpyHeader& h) {
        bool seen_descr = false;
        bool seen_order = false;
        bool seen_shape = false;
        skip_space();
        expect('{', "expected '{' opening the header dict");
        for (;;) {
            skip_space();
            if (peek() == '}') {
                ++pos_;
                break;
            }
            const std::size_t key_at = pos_;
            const std::string key = string_literal("expected a quoted key or '}'");
            skip_space();
            expect(':', "expected ':' after key '" + key + "'");
            skip_space();
            if (key == "descr") {
                once(seen_descr, key, key_at);
                descr(h);
            } else if (key == "fortran_order") {
                once(seen_order, key, key_at);
                fortran_order();
            } else if (key == "shape") {
                once(seen_shape, key, key_at);
                shape(h);
            } else {
                fail(key_at, "unexpected key '" + key + "' (expected 'descr', 'fortran_order' and 'shape')");
            }
            skip_space();
            if (peek() == ',') {
                ++pos_;
            } else if (peek() != '}') {
                fail(pos_, "expected ',' or '}' after the value of '" + key + "'");
            }
        }
        const char* missing = !seen_descr ? "descr" : !seen_order ? "fortran_order" : !seen_shape ? "shape" : nullptr;
        if (missing != nullptr) {
            fail(pos_, std::string("expected '") + missing + "' key");
        }
        skip_space();
        if (pos_ != text_.size()) {
            fail(pos_, "expected only spaces and a newline after the header dict");
        }
    }

private:
    [[noreturn]] void fail(std::size_t at, const std::string& what) const {
        io::throw_format_error(source_, "header byte " + std::to_string(base_ + at), what);
    }
    [[nodiscard]] char peek() const noexcept { return pos_ < text_.size() ? text_[pos_] : '\0'; }
    void skip_space() noexcept {
        while (pos_ < text_.size() &&
               (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
            ++pos_;
        }
    }
    void expect(char c, const std::string& what) {
        if (peek() != c || pos_ >= text_.size()) {
            fail(pos_, what);
        }
        ++pos_;
    }
    void once(bool& seen, const std::string& key, std::size_t at) const {
        if (seen) {
            fail(at, "duplicate key '" + key + "'");
        }
        seen = true;
    }

    std::string string_literal(const std::string& what) {
        const char quote = peek();
        if (quote != '\'' && quote != '"') {
            fail(pos_, what);
        }
        const std::size_t start = ++pos_;
        while (pos_ < text_.size() && text_[pos_] != quote) {
            if (text_[pos_] == '\n') {
                break;
            }
            if (text_[pos_] == '\\') {
                fail(pos_, "escape sequences in string literals are not supported");
            }
            ++pos_;
        }
        if (pos_ >= text_.size() || text_[pos_] != quote) {
            fail(start - 1, "unterminated string literal");
        }
        return std::string(text_.substr(start, pos_++ - start));
    }

    void descr(NpyHeader& h) {
        const std::size_t at = pos_;
        if (peek() == '[') {
            fail(at, "structured dtypes (a list 'descr') are not supported");
        }
        const std::string d = string_literal("expected a quoted dtype string for 'descr'");
        if (d.find('O') != std::string::npos) {
            fail(at, "object arrays ('descr': '" + d + "') are not supported (they hold pickled Python objects)");
        }
        if (d.size() < 2) {
            fail(at, "'descr' " + d + " is not a dtype syncblob reads");
        }
        const char order = d[0];
        const std::string_view kind(d.data() + 1, d.size() - 1);
        const std::optional<Dtype> dtype = npy_dtype(kind);
        if (!dtype || (order != '<' && order != '>' && order != '|' && order != '=')) {
            fail(at, "'descr' '" + d + "' is not a dtype syncblob reads (expected one of " + npy_codes() +
                         " with byte order '<', '>', '|' or '=')");
        }
        h.dtype = *dtype;
        h.big_endian = order == '>';
    }

    void fortran_order() {
        const std::size_t at = pos_;
        if (text_.substr(pos_, 5) == "False") {
            pos_ += 5;
        } else if (text_.substr(pos_, 4) == "True") {
            fail(at,
                 "Fortran-order (column-major) arrays are not supported; save a C-order array "
                 "(np.ascontiguousarray) instead");
        } else {
            fail(at, "expected True or False for 'fortran_order'");
        }
    }

    void shape(NpyHeader& h) {
        const std::size_t start = pos_;
        expect('(', "expected a tuple '(...)' for 'shape'");
        h.shape.clear();
        bool trailing_comma = false;
        for (;;) {
            skip_space();
            if (peek() == ')') {
                if (h.shape.size() == 1 && !trailing_comma) {
                    fail(pos_, "a one-axis 'shape' needs a trailing comma, as in (3,)");
                }
                ++pos_;
                break;
            }
            const std::size_t at = pos_;
            if (peek() < '0' || peek() > '9') {
                fail(at, "expected a non-negative integer extent in 'shape'");
            }
            std::uint64_t v = 0;
            while (peek() >= '0' && peek() <= '9') {
                const auto digit = static_cast<std::uint64_t>(peek() - '0');
                if (v > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - digit) / 10) {
                    fail(at, "extent does not fit in int64");
                }
                v = v * 10 + digit;
                ++pos_;
            }
            if (h.shape.size() == Shape::max_axes) {
                fail(at, "more than " + std::to_string(Shape::max_axes) + " axes");
            }
            h.shape.push_back(static_cast<std::int64_t>(v));
            skip_space();
            trailing_comma = peek() == ',';
            if (trailing_comma) {
                ++pos_;
            } else if (peek() != ')') {
                fail(pos_, "expected ',' or ')' in 'shape'");
            }
        }
        if (auto problem = syncblob::detail::extents_problem(h.shape)) {
            fail(start, "'shape': " + *problem);
        }
        h.count = static_cast<std::uint64_t>(syncblob::detail::count_of(h.shape));
    }

    std::string_view text_;
    std::uint64_t base_;
    std::string_view source_;
    std::size_t pos_ = 0;
};

/// Parses the fixed prefix (magic, version, header length) from the first bytes of a file.
/// Returns the header length and where the header text starts. `size` is the whole input size.
inline std::pair<std::uint32_t, std::uint32_t> parse_npy_prefix(std::span<const unsigned char> first,
                                                                std::uint64_t size, std::string_view source,
                                                                NpyHeader& h) {
    if (size < 10 || std::string_view(reinterpret_cast<const char*>(first.data()), 6) != npy_magic) {
        if (size >= 6 && std::string_view(reinterpret_cast<const char*>(first.data()), 6) != npy_magic) {
            io::throw_format_error(source, "byte 0", "expected the magic string \"\\x93NUMPY\" of a .npy file");
        }
        io::throw_format_error(
            source, "byte 0",
            "expected at least 10 bytes of .npy prefix, the input holds " + std::to_string(size) + " (truncated)");
    }
    h.major = first[6];
    h.minor = first[7];
    if (h.major < 1 || h.major > 3 || h.minor != 0) {
        io::throw_format_error(source, "byte 6",
                               "unsupported .npy version " + std::to_string(h.major) + "." + std::to_string(h.minor) +
                                   " (expected 1.0, 2.0 or 3.0)");
    }
    const std::uint32_t prefix = h.major == 1 ? 10 : 12;
    if (size < prefix) {
        io::throw_format_error(source, "byte 8", "truncated header length field");
    }
    std::uint32_t length = first[8] | (static_cast<std::uint32_t>(first[9]) << 8);
    if (h.major != 1) {
        length |= (static_cast<std::uint32_t>(first[10]) << 16) | (static_cast<std::uint32_t>(first[11]) << 24);
    }
    if (length > npy_max_header) {
        io::throw_format_error(source, "header length",
                               std::to_string(length) + " bytes exceed the limit of " + std::to_string(npy_max_header));
    }
    if (size - prefix < length) {
        io::throw_format_error(source, "header length",
                               std::to_string(length) + " header bytes expected, the input holds only " +
                                   std::to_string(size - prefix) + " after the prefix (truncated)");
    }
    return {length, prefix};
}

}  // namespace io::detail

SYNCBLOB_END_NAMESPACE
