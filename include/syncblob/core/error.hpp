// SPDX-License-Identifier: BSD-2-Clause
#pragma once

/// \file
/// The exception hierarchy. Every failure syncblob reports is one of these
/// (or `std::bad_alloc` when memory runs out); nothing aborts.

#include <stdexcept>
#include <string>

#include "config.hpp"

SYNCBLOB_BEGIN_NAMESPACE

/// Base of every syncblob exception.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Bad extents, an element count that overflows, too many axes, or a shape mismatch.
class ShapeError : public Error {
public:
    using Error::Error;
};

/// An axis, index or offset out of range.
class IndexError : public Error {
public:
    using Error::Error;
};

/// An operation the current head of a buffer does not allow.
class StateError : public Error {
public:
    using Error::Error;
};

/// A failed device runtime or library call; the message carries the call, the code and its name.
class DeviceError : public Error {
public:
    DeviceError(const std::string& what, int code = 0) : Error(what), code_(code) {}
    /// The status code the failing call returned (0 when not applicable).
    [[nodiscard]] int code() const noexcept { return code_; }

private:
    int code_;
};

/// No usable device: a host-only buffer, no driver, or no GPU.
class NoDeviceError : public DeviceError {
public:
    using DeviceError::DeviceError;
};

/// A malformed file or document; the message names the file, the field or offset, and what was expected.
class FormatError : public Error {
public:
    using Error::Error;
};

/// An option or argument outside what the call accepts (a size, count, thread number, timeout,
/// prefix or name); the message names the option and its value. Checked where the option enters,
/// before anything is read, written or sent.
class OptionError : public Error {
public:
    using Error::Error;
};

/// A failed file-system operation (open, read, write, rename).
class IOError : public Error {
public:
    using Error::Error;
};

SYNCBLOB_END_NAMESPACE
