package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/commsim/commsim/hw/cuda"
	"github.com/commsim/commsim/hw/metal"
)

func newDevicesCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "devices",
		Short:   "List the devices each backend can use, or why it cannot",
		Example: `  commsim devices`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			listDevices(cmd.OutOrStdout())
			return nil
		},
	}
}

// listDevices prints every backend: the simulator always works; the real
// ones list their GPUs or say why there are none.
func listDevices(w io.Writer) {
	fmt.Fprintln(w, "sim:   simulated GPUs of any topology (--topo)")
	if devs, err := cuda.Devices(); err != nil {
		fmt.Fprintf(w, "cuda:  none: %v\n", err)
	} else {
		v, _ := cuda.DriverVersion()
		lib, _ := cuda.DriverLibrary()
		fmt.Fprintf(w, "cuda:  %d GPU(s), driver supports CUDA %d.%d, %s\n", len(devs), v/1000, v%1000/10, lib)
		for _, d := range devs {
			fmt.Fprintf(w, "  %d: %s, %d MiB, sm_%d%d\n", d.Index, d.Name, d.MemoryBytes>>20, d.Major, d.Minor)
		}
		if v, err := cuda.NCCLVersion(); err != nil {
			fmt.Fprintf(w, "  native (NCCL): none: %v\n", err)
		} else {
			lib, _ := cuda.NCCLLibrary()
			fmt.Fprintf(w, "  native (NCCL): NCCL %s, %s\n", cuda.NCCLVersionString(v), lib)
		}
	}
	if name, err := metal.DeviceName(); err != nil {
		fmt.Fprintf(w, "metal: none: %v\n", err)
	} else {
		fmt.Fprintf(w, "metal: %s, as virtual ranks (--ranks)\n", name)
	}
}
