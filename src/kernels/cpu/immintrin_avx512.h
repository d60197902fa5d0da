// <immintrin.h> for the AVX-512 translation units. GCC 12 reports its own _mm512_undefined_*
// placeholders inside the intrinsic headers as uninitialized (GCC bug 105593); the warnings point
// into the header, so they are silenced there only. No code of ours is in this header.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
