// CRC-32 (the zlib/IEEE 802.3 polynomial, reflected, 0xEDB88320), so a checksum the engine writes can be
// checked by any zlib (Node's zlib.crc32, Python's zlib.crc32) without this code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace moe {

// Continues a CRC over more bytes: crc32(b, crc32(a)) == crc32(a + b); start with 0.
uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);
// The CRC of a whole file, read in chunks (never all in memory); errors name the path.
uint32_t crc32_file(const std::string& path, uint64_t* bytes = nullptr);

}  // namespace moe
