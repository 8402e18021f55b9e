// NumPy's .npz archives: several arrays in one file, as numpy.savez and numpy.savez_compressed
// write them and numpy.load reads them.
//
// An .npz is a ZIP archive (PKWARE's APPNOTE.TXT) whose members are .npy files named KEY.npy; numpy
// hands them out under KEY. covflow reads archives of stored (method 0) and deflated (method 8)
// members, with or without ZIP64 records, through the central directory: the local headers
// numpy.savez writes carry 0xFFFFFFFF sizes and a ZIP64 extra field (Python's zipfile opens each
// member with force_zip64=True), and only the central directory has the sizes of a small member.
// Every member's CRC-32 is checked, and every size and offset the archive states is checked against
// the file's length before anything is read or allocated (a deflated member's stated size against
// deflate's largest ratio to its compressed size), so a damaged archive costs an error message that
// names the archive and the member, not memory or a crash. Encrypted members, other compression
// methods, multi-disk archives and members whose names do not end in .npy are refused.
//
// covflow writes stored members (as numpy.savez does), switching to ZIP64 records — the extra
// field in the local and central headers, the ZIP64 end-of-central-directory record and its
// locator — for any size or offset that reaches 0xFFFFFFFF, and for 65535 members or more. The
// archive is written under a temporary name in the target's directory and renamed when complete,
// so a failed write never leaves a partial archive under the final name.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "covflow/io/npy.hpp"

namespace covflow::io {

struct NpzMember {
  std::string name;  // numpy's key: the member's file name without ".npy"
  NpyArray array;
};

// Every member, in the archive's order. Throws NpyError (npy.hpp's kinds: io, damaged,
// unsupported) whose message starts with the path, and for a member's problem goes on with the
// member's file name ("C.npz: diag.npy: CRC-32 mismatch ...").
std::vector<NpzMember> read_npz(const std::filesystem::path& path);

// The member named `name` (without ".npy"), or nullptr.
const NpzMember* find_member(std::span<const NpzMember> members, std::string_view name);

struct NpzWriteOptions {
  // Sizes and offsets at or above this are written with ZIP64 records. ZIP's own limit by default;
  // a smaller value makes small archives exercise the ZIP64 path (tests, checks of other readers).
  std::uint64_t zip64_threshold = 0xFFFFFFFF;
};

// Writes the members, in order, as stored KEY.npy files (each as write_npy would write it).
// Throws NpyError: argument for a member whose data does not fit its shape, an empty, duplicated
// or overlong name; io when the archive cannot be written (nothing is left at `path` then, and an
// archive that was there before is untouched).
void write_npz(const std::filesystem::path& path, std::span<const NpzMember> members,
               const NpzWriteOptions& options = {});

// Whether the file starts like a ZIP archive ("PK\x03\x04", or "PK\x05\x06" for an empty one).
// False for a file that cannot be read.
bool looks_like_zip(const std::filesystem::path& path);

}  // namespace covflow::io
