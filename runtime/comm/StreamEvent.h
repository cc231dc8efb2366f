//===- StreamEvent.h - a mark of the work queued on a CUDA stream -*- C++ -*-===//
//
// What a communicator on the background collectives' thread waits for
// before its call (Communicator::markQueuedWork): an event recorded on the
// program's compute stream when the collective was queued. The NCCL
// communicator's duplicates and the CUDA backend's host staging both use it.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_STREAMEVENT_H
#define CLEAVE_RUNTIME_COMM_STREAMEVENT_H

#include "runtime/comm/Communicator.h"
#include "runtime/comm/Deadline.h"

#include <cuda_runtime_api.h>

#include <memory>

namespace cleave::rt::comm {

class StreamEvent final : public QueuedWork {
public:
  ~StreamEvent() override {
    if (event_)
      cudaEventDestroy(event_);
  }

  /// An event recorded on `stream` (of the current device) now; null with
  /// `status` the failing call's when it cannot be.
  static std::shared_ptr<const StreamEvent> record(cudaStream_t stream, cudaError_t &status) {
    auto mark = std::make_shared<StreamEvent>();
    status = cudaGetDevice(&mark->device_);
    if (status == cudaSuccess)
      status = cudaEventCreateWithFlags(&mark->event_, cudaEventDisableTiming);
    if (status == cudaSuccess)
      status = cudaEventRecord(mark->event_, stream);
    return status == cudaSuccess ? mark : nullptr;
  }

  /// Makes the event's device current for the calling thread (another
  /// than the recording one) and polls until the work queued before the
  /// event is done: cudaSuccess, a failure's status, or cudaErrorNotReady
  /// when `deadline` passes first.
  cudaError_t await(const Deadline &deadline) const {
    cudaError_t status = cudaSetDevice(device_);
    if (status != cudaSuccess)
      return status;
    status = cudaErrorNotReady;
    pollUntil(deadline, [&] {
      status = cudaEventQuery(event_);
      return status != cudaErrorNotReady;
    });
    return status;
  }

private:
  int device_ = 0;
  cudaEvent_t event_ = nullptr;
};

} // namespace cleave::rt::comm

#endif
