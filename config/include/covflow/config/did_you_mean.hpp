// "did you mean" for misspelt keys and values.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace covflow::config {

// Optimal-string-alignment distance: insertions, deletions, substitutions and transpositions of
// neighbours each cost 1 ("cdua" is 1 from "cuda").
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, if it is close enough to be a likely misspelling: within a
// third of the word's length (at least 1, at most 3) edits, or a candidate the word begins, or
// one that begins the word (3 characters or more). Ties go to the earlier candidate.
std::optional<std::string> closest(std::string_view word, std::span<const std::string> candidates);

}  // namespace covflow::config
