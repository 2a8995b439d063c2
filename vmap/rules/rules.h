#pragma once
// The batching rules of every built-in op (vmap/rules/<family>_rules.cpp).

namespace td {

// Fills the engine's rule table once (thread-safe); vmap and functional_vmap call it.
void ensure_batch_rules();

}  // namespace td
