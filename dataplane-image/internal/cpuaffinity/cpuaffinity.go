// Package cpuaffinity is what the dataplane image's two programs know about the CPUs they may
// run on: the supervisor pins F-Stack's processes to them and the launcher hands one of them to
// the shim. Both read the same thing (the process's affinity, which kubelet's static CPU manager
// sets to the container's cpuset) and write the shim's lcore the same way, so they agree.
package cpuaffinity

import (
	"fmt"
	"math/big"

	"golang.org/x/sys/unix"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Own is this process's CPU affinity (sched_getaffinity), ascending: the container's cpuset,
// unless something narrowed it (taskset).
func Own() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// LcoreMask is the hex mask ("0x20" for CPU 5) podcontract.EnvShimInitialLcore holds for cpu
// (a mask despite its name); any CPU number, not only those that fit 64 bits.
func LcoreMask(cpu int) string {
	return "0x" + new(big.Int).Lsh(big.NewInt(1), uint(cpu)).Text(16)
}

// InitialLcoreEnv is the environment entry that puts the shim on cpu.
func InitialLcoreEnv(cpu int) string { return podcontract.EnvShimInitialLcore + "=" + LcoreMask(cpu) }
