//===- DnnlHandles.h - oneDNN C handles owned by a scope ----------*- C++ -*-===//
//
// The oneDNN primitives (ConvPrimitives, ProductPrimitives) go through its C
// API; a handle made for one call is destroyed with its scope.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_CPU_DNNLHANDLES_H
#define CLEAVE_RUNTIME_CPU_DNNLHANDLES_H

#include <dnnl.h>

namespace cleave::rt::cpu {

/// A oneDNN handle destroyed with its scope (null: none yet).
template <typename Handle, dnnl_status_t (*destroy)(Handle)> class ScopedHandle {
public:
  ScopedHandle() = default;
  ScopedHandle(const ScopedHandle &) = delete;
  ScopedHandle &operator=(const ScopedHandle &) = delete;
  ~ScopedHandle() {
    if (handle)
      destroy(handle);
  }
  Handle *out() { return &handle; }
  Handle get() const { return handle; }

private:
  Handle handle = nullptr;
};

using DescriptorHandle = ScopedHandle<dnnl_primitive_desc_t, dnnl_primitive_desc_destroy>;
using AttributesHandle = ScopedHandle<dnnl_primitive_attr_t, dnnl_primitive_attr_destroy>;
using PrimitiveHandle = ScopedHandle<dnnl_primitive_t, dnnl_primitive_destroy>;
using ScopedMemory = ScopedHandle<dnnl_memory_t, dnnl_memory_destroy>;

/// Makes `reorder` from layout `from` to `to`; false when oneDNN refuses, or
/// when it would need a scratchpad. Every primitive of a run takes its
/// scratchpad from the run's counted memory (oneDNN's user mode); the
/// reorders between plain and blocked f32 and bf16 layouts need none, and
/// one that did would have no memory to use.
inline bool createReorder(const dnnl_memory_desc_t &from, const dnnl_memory_desc_t &to,
                          dnnl_engine_t engine, dnnl_primitive_t &reorder) {
  AttributesHandle attributes;
  DescriptorHandle pd;
  if (dnnl_primitive_attr_create(attributes.out()) != dnnl_success ||
      dnnl_primitive_attr_set_scratchpad_mode(attributes.get(), dnnl_scratchpad_mode_user) !=
          dnnl_success ||
      dnnl_reorder_primitive_desc_create(pd.out(), &from, engine, &to, engine, attributes.get()) !=
          dnnl_success)
    return false;
  const dnnl_memory_desc_t *scratchpad =
      dnnl_primitive_desc_query_md(pd.get(), dnnl_query_scratchpad_md, 0);
  if (scratchpad && dnnl_memory_desc_get_size(scratchpad) > 0)
    return false;
  return dnnl_primitive_create(&reorder, pd.get()) == dnnl_success;
}

} // namespace cleave::rt::cpu

#endif
