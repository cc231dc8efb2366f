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

} // namespace cleave::rt::cpu

#endif
