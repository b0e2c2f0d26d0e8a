// Stable names of enums. An enum whose values are stored (SQLite, JSON records) or printed has one
// table of {value, "name"} pairs, written once beside the enum; its to_string and from_string
// are read from that table, so a name cannot be spelled two ways and a stored name always reads
// back as the value that wrote it. A name is a contract with every record already written: rename
// one only with an upgrade of the records. tests/unit/names_test.cpp round-trips every table.
//
//   inline constexpr auto colour_names =
//       kb::name_table<colour>({{colour::red, "red"}, {colour::green, "green"}});
//   static_assert(colour_names.well_formed());
//   std::string to_string(colour c) { return std::string(colour_names.name(c)); }
//   std::optional<colour> colour_from_string(std::string_view s) { return colour_names.parse(s); }
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace kb {

template <class E> struct enum_name {
  E value;
  std::string_view name;
};

template <class E, std::size_t N> struct names_of {
  std::array<enum_name<E>, N> entries;

  // The value's name; "?" for a value the table does not hold (an integer cast to the enum).
  constexpr std::string_view name(E e) const {
    for (const auto& entry : entries) {
      if (entry.value == e) {
        return entry.name;
      }
    }
    return "?";
  }

  // The value named exactly s (case and spelling as stored); nullopt for any other text.
  constexpr std::optional<E> parse(std::string_view s) const {
    for (const auto& entry : entries) {
      if (entry.name == s) {
        return entry.value;
      }
    }
    return std::nullopt;
  }

  // Every name non-empty and said once, every value named once.
  constexpr bool well_formed() const {
    for (std::size_t i = 0; i < N; ++i) {
      if (entries[i].name.empty() || entries[i].name == "?") {
        return false;
      }
      for (std::size_t j = i + 1; j < N; ++j) {
        if (entries[i].name == entries[j].name || entries[i].value == entries[j].value) {
          return false;
        }
      }
    }
    return true;
  }

  constexpr std::size_t size() const { return N; }
  constexpr auto begin() const { return entries.begin(); }
  constexpr auto end() const { return entries.end(); }
};

// kb::name_table<E>({{E::a, "a"}, {E::b, "b"}}): the table, its size taken from the list.
template <class E, std::size_t N>
constexpr names_of<E, N> name_table(const enum_name<E> (&list)[N]) {
  names_of<E, N> t{};
  for (std::size_t i = 0; i < N; ++i) {
    t.entries[i] = list[i];
  }
  return t;
}

} // namespace kb
