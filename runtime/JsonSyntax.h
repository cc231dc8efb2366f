//===- JsonSyntax.h - where a JSON text stops being JSON ------*- C++ -*-===//
//
// nlohmann::json without exceptions only says that a text did not parse; a
// user editing a plan file needs the line and column. One SAX pass that
// keeps every value's events to itself and records the first error gives
// them.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_JSONSYNTAX_H
#define CLEAVE_RUNTIME_JSONSYNTAX_H

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace cleave::rt {

/// "line L, column C: WHAT" for the first syntax error in `text`, or empty
/// when `text` is one JSON value.
inline std::string jsonSyntaxError(std::string_view text) {
  struct FirstError : nlohmann::json_sax<nlohmann::json> {
    std::string message;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t &) override { return true; }
    bool string(string_t &) override { return true; }
    bool binary(binary_t &) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t &) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t, const std::string &,
                     const nlohmann::detail::exception &error) override {
      // what() is "[json.exception.parse_error.101] parse error at line 3,
      // column 7: syntax error ..."; keep what follows "at ".
      message = error.what();
      std::size_t at = message.find(" at line ");
      message = at == std::string::npos ? message : message.substr(at + 4);
      return false;
    }
  } sax;
  nlohmann::json::sax_parse(text, &sax);
  return sax.message;
}

} // namespace cleave::rt

#endif
