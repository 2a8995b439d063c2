#include "vmap/rules/rules.h"

#include <mutex>

namespace td::rules {
// One registration function per op family, each in its <family>_rules.cpp.
void register_random_rules();
void register_unary_rules();
void register_binary_rules();
void register_reduce_rules();
void register_scan_rules();
void register_sort_rules();
void register_linalg_rules();
void register_norm_rules();
void register_conv_rules();
void register_pool_rules();
void register_embedding_rules();
void register_view_rules();
void register_copy_rules();
void register_join_rules();
void register_index_rules();
void register_inplace_rules();
}  // namespace td::rules

namespace td {

void ensure_batch_rules() {
  static std::once_flag once;
  std::call_once(once, [] {
    rules::register_random_rules();
    rules::register_unary_rules();
    rules::register_binary_rules();
    rules::register_reduce_rules();
    rules::register_scan_rules();
    rules::register_sort_rules();
    rules::register_linalg_rules();
    rules::register_norm_rules();
    rules::register_conv_rules();
    rules::register_pool_rules();
    rules::register_embedding_rules();
    rules::register_view_rules();
    rules::register_copy_rules();
    rules::register_join_rules();
    rules::register_index_rules();
    rules::register_inplace_rules();
  });
}

}  // namespace td
