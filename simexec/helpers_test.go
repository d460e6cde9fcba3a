package simexec_test

import "github.com/commsim/commsim/internal/simtest"

// world and buffers make simulated clusters and collective buffers.
var (
	world   = simtest.World
	buffers = simtest.Buffers
)
