// libmultiedge: errors as values.
//
// Every call that can fail returns a Result<T> (or Status): either the value
// or an Error carrying the errno-style std::error_code and a sentence a person
// can act on ("cannot open /dev/multiedge: No such file or directory (is
// multiedge.ko loaded? ...)").  Nothing is thrown and nothing fails silently.
#pragma once

#include <cassert>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

namespace multiedge {

class Error {
public:
	Error(std::error_code code, std::string message)
		: code_(code), message_(std::move(message)) {}

	// Builds an error from an errno value; `what` says what was attempted.
	static Error from_errno(int err, std::string what);

	const std::error_code &code() const noexcept { return code_; }
	// The full sentence: what failed, why, and a hint where one helps.
	const std::string &message() const noexcept { return message_; }

private:
	std::error_code code_;
	std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
public:
	Result(T value) : v_(std::move(value)) {}
	Result(Error error) : v_(std::move(error)) {}

	bool ok() const noexcept { return v_.index() == 0; }
	explicit operator bool() const noexcept { return ok(); }

	T &value() & { assert(ok()); return std::get<0>(v_); }
	const T &value() const & { assert(ok()); return std::get<0>(v_); }
	T &&value() && { assert(ok()); return std::get<0>(std::move(v_)); }
	T *operator->() { return &value(); }
	const T *operator->() const { return &value(); }

	const Error &error() const { assert(!ok()); return std::get<1>(v_); }

private:
	std::variant<T, Error> v_;
};

// Result of a call that yields nothing but can fail.
class [[nodiscard]] Status {
public:
	Status() = default;
	Status(Error error) : error_(std::move(error)), failed_(true) {}

	bool ok() const noexcept { return !failed_; }
	explicit operator bool() const noexcept { return ok(); }
	const Error &error() const { assert(failed_); return error_; }

private:
	Error error_{{}, {}};
	bool failed_ = false;
};

} // namespace multiedge
