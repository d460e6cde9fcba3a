// Command genptx writes the PTX module of hw/cuda (ptxgen.Generate) to the
// file named by -o. hw/cuda runs it through go generate.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/commsim/commsim/hw/cuda/internal/ptxgen"
)

func main() {
	out := flag.String("o", "kernels.ptx", "output file")
	flag.Parse()
	if err := os.WriteFile(*out, []byte(ptxgen.Generate()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genptx:", err)
		os.Exit(1)
	}
}
