//===- MpiTest.h - what communicator tests share ----------------*- C++ -*-===//

#ifndef CLEAVE_RUNTIME_COMM_MPITEST_H
#define CLEAVE_RUNTIME_COMM_MPITEST_H

#include "runtime/comm/Mpi.h"

namespace cleave::rt::comm {

/// The MPI session MpiTestMain started for the tests of this process.
const MpiSession &testSession();

} // namespace cleave::rt::comm

#endif
