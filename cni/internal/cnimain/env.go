package cnimain

import (
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/containernetworking/cni/pkg/types"
)

// envVar is one CNI_* variable: the commands that require it and its check, if any.
type envVar struct {
	name     string
	val      func(*CmdArgs) *string
	required []string
	check    func(string) *types.Error
}

var envVars = []envVar{
	{"CNI_COMMAND", nil, []string{"ADD", "CHECK", "DEL", "GC", "STATUS"}, nil},
	{"CNI_CONTAINERID", func(a *CmdArgs) *string { return &a.ContainerID }, []string{"ADD", "CHECK", "DEL"}, checkContainerID},
	{"CNI_NETNS", func(a *CmdArgs) *string { return &a.Netns }, []string{"ADD", "CHECK"}, nil},
	{"CNI_IFNAME", func(a *CmdArgs) *string { return &a.IfName }, []string{"ADD", "CHECK", "DEL"}, checkIfName},
	{"CNI_ARGS", func(a *CmdArgs) *string { return &a.Args }, nil, nil},
	{"CNI_PATH", func(a *CmdArgs) *string { return &a.Path }, []string{"ADD", "CHECK", "DEL", "GC", "STATUS"}, nil},
	{"CNI_NETNS_OVERRIDE", func(a *CmdArgs) *string { return &a.NetnsOverride }, nil, nil},
}

func requiredFor(v envVar, cmd string) bool {
	for _, c := range v.required {
		if c == cmd {
			return true
		}
	}
	return false
}

// cmdArgs reads the environment and stdin as skel does: every missing variable is named in one
// error, the checks run only for the commands that require the variable, and VERSION reads no
// stdin.
func (d *dispatcher) cmdArgs() (string, *CmdArgs, *types.Error) {
	cmd := d.getenv("CNI_COMMAND")
	args := &CmdArgs{}
	var missing []string
	for _, v := range envVars {
		val := d.getenv(v.name)
		if v.val != nil {
			*v.val(args) = val
		}
		switch {
		case val == "" && (requiredFor(v, cmd) || v.name == "CNI_COMMAND"):
			missing = append(missing, v.name)
		case val != "" && requiredFor(v, cmd) && v.check != nil:
			if err := v.check(val); err != nil {
				return "", nil, err
			}
		}
	}
	if len(missing) > 0 {
		return "", nil, types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("required env variables [%s] missing", strings.Join(missing, ",")), "")
	}
	if cmd == "VERSION" {
		return cmd, args, nil
	}
	stdin, err := io.ReadAll(io.LimitReader(d.stdin, MaxStdin+1))
	if err != nil {
		return "", nil, types.NewError(types.ErrIOFailure, fmt.Sprintf("error reading from stdin: %v", err), "")
	}
	if len(stdin) > MaxStdin {
		return "", nil, types.NewError(types.ErrDecodingFailure,
			fmt.Sprintf("the network config on stdin is larger than %d bytes", MaxStdin), "a network config is a few kilobytes; check what the runtime sends")
	}
	args.StdinData = stdin
	if err := checkNetworkName(stdin); err != nil {
		return "", nil, err
	}
	return cmd, args, nil
}

// MaxStdin bounds the network config read from stdin: a real one, prevResult and valid
// attachments of a busy node included, is tens of kilobytes.
const MaxStdin = 1 << 20

// validName is the CNI library's name rule for container IDs and network names:
// [a-zA-Z0-9][a-zA-Z0-9_.-]*.
func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return s != ""
}

func checkContainerID(id string) *types.Error {
	if !validName(id) {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "invalid characters in containerID", id)
	}
	return nil
}

// maxIfName is IFNAMSIZ less the NUL.
const maxIfName = 15

func checkIfName(name string) *types.Error {
	switch {
	case len(name) > maxIfName:
		return types.NewError(types.ErrInvalidEnvironmentVariables, "interface name is too long",
			fmt.Sprintf("interface name should be less than %d characters", maxIfName+1))
	case name == "." || name == "..":
		return types.NewError(types.ErrInvalidEnvironmentVariables, "interface name is . or ..", "")
	}
	for _, r := range name {
		if r == '/' || r == ':' || isSpace(r) {
			return types.NewError(types.ErrInvalidEnvironmentVariables, "interface name contains / or : or whitespace characters", "")
		}
	}
	return nil
}

// isSpace is unicode.IsSpace without linking the unicode tables.
func isSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// sameNetns reports whether netns is the plugin's own network namespace. A netns that cannot be
// opened is not (DEL runs after the runtime removed it), as in skel.
func sameNetns(self, netns string) (bool, *types.Error) {
	var target, own syscall.Stat_t
	if netns == "" || syscall.Stat(netns, &target) != nil {
		return false, nil
	}
	if self == "" {
		self = "/proc/thread-self/ns/net"
	}
	if err := syscall.Stat(self, &own); err != nil {
		return false, types.NewError(types.ErrInvalidNetNS, "get plugin's netns failed", "")
	}
	return own.Dev == target.Dev && own.Ino == target.Ino, nil
}

// ValidateContainerID applies ADD's check of CNI_CONTAINERID to a name read from elsewhere (a
// file a pod can write, OVSDB).
func ValidateContainerID(id string) error {
	if e := checkContainerID(id); e != nil {
		return fmt.Errorf("%s %q", e.Msg, id)
	}
	return nil
}

// ValidateIfName applies ADD's check of CNI_IFNAME to a name read from elsewhere.
func ValidateIfName(name string) error {
	if name == "" {
		return fmt.Errorf("interface name is empty")
	}
	if e := checkIfName(name); e != nil {
		return fmt.Errorf("%s (%q)", e.Msg, name)
	}
	return nil
}
