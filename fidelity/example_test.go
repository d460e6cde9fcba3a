package fidelity_test

import (
	"fmt"
	"os"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/fidelity"
	"github.com/commsim/commsim/topology"
)

// Check an nccl-tests all-reduce log, measured on links with twice the
// latency and half the bandwidth, against the fabric as datasheets state
// it: the prediction is too fast at every size, most at the largest.
func Example() {
	const log = `# Collective test starting: all_reduce_perf
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024           256     float     sum      -1    24.04    0.04    0.06      0    24.10    0.04    0.06      0
       16384          4096     float     sum      -1    24.61    0.67    1.00      0    24.70    0.66    1.00      0
      262144         65536     float     sum      -1    33.83    7.75   11.62      0    33.90    7.73   11.60      0
     4194304       1048576     float     sum      -1   181.29   23.14   34.70      0   181.50   23.11   34.66      0
`
	lg, err := calibrate.ParseLog("all_reduce.txt", []byte(log))
	if err != nil {
		panic(err)
	}
	topo, err := topology.Parse("switch:4,bw=80GB/s,lat=1us")
	if err != nil {
		panic(err)
	}
	rep, err := fidelity.Check(lg, topo, fidelity.Config{Algo: "ring"})
	if err != nil {
		panic(err)
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		panic(err)
	}
	fmt.Printf("medium sizes: %d, median |error| %.0f%%\n", rep.Bands[1].Sizes, 100*rep.Bands[1].Median)
	// Output:
	//      size(B)  measured(us)  predicted(us)  error(%)  algo
	//         1024         24.04          12.02    -50.00  ring
	//        16384         24.61          12.31    -49.99  ring
	//       262144         33.83          16.92    -50.00  ring
	//      4194304        181.29          90.64    -50.00  ring
	// # |error|: median 50.0% over 4 sizes, max 50.0% at 1024 bytes
	// # median |error| by size: < 64 KiB: 50.0% (2 sizes); 64 KiB–16 MiB: 50.0% (2 sizes); ≥ 16 MiB: no sizes
	// medium sizes: 2, median |error| 50%
}
