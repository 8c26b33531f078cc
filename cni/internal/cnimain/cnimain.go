// Package cnimain is the plugin's entry point: it reads the CNI environment and stdin, checks
// them and the spec version, and calls the plugin's function for CNI_COMMAND, with the same
// behaviour, error codes and messages as the CNI library's skel package (v1.3).
//
// It replaces skel because skel links packages a plugin that never enters a namespace does not
// need (its netns check pulls a netns library, its name checks pull regexp and the unicode
// tables) and every CNI call paid for their init and page faults at process start. The result
// and version types are still the CNI library's own.
package cnimain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// CmdArgs is what one CNI call passes the plugin (the fields of skel.CmdArgs).
type CmdArgs struct {
	ContainerID   string
	Netns         string
	IfName        string
	Args          string
	Path          string
	NetnsOverride string
	StdinData     []byte
}

// Funcs are the plugin's commands; a nil one is accepted and does nothing.
type Funcs struct {
	Add, Del, Check, GC, Status func(*CmdArgs) error
}

// Main runs the command and exits 1 after printing the CNI error on stdout when it fails.
func Main(funcs Funcs, versions version.PluginInfo, about string) {
	if e := (&dispatcher{getenv: os.Getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}).run(funcs, versions, about); e != nil {
		if err := e.Print(); err != nil {
			fmt.Fprintln(os.Stderr, "error writing the error JSON to stdout:", err)
		}
		os.Exit(1)
	}
}

type dispatcher struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
	// pluginNetns is the plugin's own network namespace; empty means this thread's.
	pluginNetns string
}

func (d *dispatcher) run(funcs Funcs, versions version.PluginInfo, about string) *types.Error {
	cmd, args, err := d.cmdArgs()
	if err != nil {
		if err.Code == types.ErrInvalidEnvironmentVariables && d.getenv("CNI_COMMAND") == "" && about != "" {
			fmt.Fprintln(d.stderr, about)
			fmt.Fprintf(d.stderr, "CNI protocol versions supported: %s\n", strings.Join(versions.SupportedVersions(), ", "))
			return nil
		}
		return err
	}
	switch cmd {
	case "ADD":
		return d.callOutsideNetns(args, versions, funcs.Add)
	case "DEL":
		return d.callOutsideNetns(args, versions, funcs.Del)
	case "CHECK":
		return callFrom(args, versions, "0.4.0", cmd, funcs.Check)
	case "GC":
		return callFrom(args, versions, "1.1.0", cmd, funcs.GC)
	case "STATUS":
		return callFrom(args, versions, "1.1.0", cmd, funcs.Status)
	case "VERSION":
		if err := versions.Encode(d.stdout); err != nil {
			return types.NewError(types.ErrIOFailure, err.Error(), "")
		}
		return nil
	}
	return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI_COMMAND: %v", cmd), "")
}

// callOutsideNetns calls ADD or DEL and then, as skel does, refuses a CNI_NETNS that is the
// plugin's own namespace unless CNI_NETNS_OVERRIDE says so.
func (d *dispatcher) callOutsideNetns(args *CmdArgs, versions version.PluginInfo, fn func(*CmdArgs) error) *types.Error {
	if err := checkVersionAndCall(args, versions, fn); err != nil {
		return err
	}
	if strings.ToUpper(args.NetnsOverride) == "TRUE" || args.NetnsOverride == "1" {
		return nil
	}
	same, err := sameNetns(d.pluginNetns, args.Netns)
	if err != nil {
		return err
	}
	if same {
		return types.NewError(types.ErrInvalidNetNS, "plugin's netns and netns from CNI_NETNS should not be the same", "")
	}
	return nil
}

// callFrom runs the commands that exist from spec version minVersion on (CHECK, GC, STATUS).
func callFrom(args *CmdArgs, versions version.PluginInfo, minVersion, cmd string, fn func(*CmdArgs) error) *types.Error {
	confVersion, err := (&version.ConfigDecoder{}).Decode(args.StdinData)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	if ok, err := version.GreaterThanOrEqualTo(confVersion, minVersion); err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	} else if !ok {
		return types.NewError(types.ErrIncompatibleCNIVersion, "config version does not allow "+cmd, "")
	}
	for _, pluginVersion := range versions.SupportedVersions() {
		ok, err := version.GreaterThanOrEqualTo(pluginVersion, confVersion)
		if err != nil {
			return types.NewError(types.ErrDecodingFailure, err.Error(), "")
		}
		if ok {
			return checkVersionAndCall(args, versions, fn)
		}
	}
	return types.NewError(types.ErrIncompatibleCNIVersion, "plugin version does not allow "+cmd, "")
}

func checkVersionAndCall(args *CmdArgs, versions version.PluginInfo, fn func(*CmdArgs) error) *types.Error {
	confVersion, err := (&version.ConfigDecoder{}).Decode(args.StdinData)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	if verErr := (&version.Reconciler{}).Check(confVersion, versions); verErr != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, "incompatible CNI versions", verErr.Details())
	}
	if fn == nil {
		return nil
	}
	if err := fn(args); err != nil {
		var e *types.Error
		if errors.As(err, &e) {
			return e
		}
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	return nil
}

// checkNetworkName is skel's check of the config's "name".
func checkNetworkName(stdin []byte) *types.Error {
	var conf struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("error unmarshall network config: %v", err), "")
	}
	if conf.Name == "" {
		return types.NewError(types.ErrInvalidNetworkConfig, "missing network name", "")
	}
	if !validName(conf.Name) {
		return types.NewError(types.ErrInvalidNetworkConfig, "invalid characters found in network name", conf.Name)
	}
	return nil
}
