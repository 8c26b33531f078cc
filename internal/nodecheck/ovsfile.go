package nodecheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/kube-fstack/kube-fstack/internal/fsutil"
)

// The node agent holds no OVS socket: a connection to OVSDB or ovs-vswitchd's unixctl socket is
// full control of OVS, which is root (a dpdk port with a pcap devargs writes any host file), and
// a read-only mount does not stop a unix socket connect. The CNI DaemonSet's installer container,
// root on the host already (it writes the binary the runtime runs as root), asks OVSDB and hands
// the answers to the agent in a file of an emptyDir the two share (OVSAnswers). The agent reads
// that file as hostile input: bounded, validated, no symlink, and stale answers are reported as
// such rather than trusted.

// OVSAnswersVersion is the format of OVSAnswers; a reader refuses any other. 2 added the DPDK,
// PMD and uplink facts.
const OVSAnswersVersion = 2

// ovsAnswersLimit bounds the file: a bridge lists one kernel port per veth and a few uplinks,
// a few hundred at most.
const ovsAnswersLimit = 512 << 10

// OVSAnswers is one round of the OVS questions the node checks ask.
type OVSAnswers struct {
	Version int       `json:"version"`
	Asked   time.Time `json:"asked"`
	Bridge  string    `json:"bridge"`
	// Error is why OVSDB did not answer the bridge question; then nothing else is set.
	Error    string `json:"error,omitempty"`
	Found    bool   `json:"found"`
	Datapath string `json:"datapath,omitempty"`
	// FactsError is why the facts question failed; Facts is nil then.
	FactsError string       `json:"factsError,omitempty"`
	Facts      *BridgeFacts `json:"facts,omitempty"`
}

// AskOVS asks ovs both questions about bridge, each bounded by ovsTimeout.
func AskOVS(ctx context.Context, ovs OVS, bridge string, now time.Time) *OVSAnswers {
	a := &OVSAnswers{Version: OVSAnswersVersion, Asked: now.UTC(), Bridge: bridge}
	qctx, cancel := context.WithTimeout(ctx, ovsTimeout)
	defer cancel()
	var err error
	if a.Datapath, a.Found, err = ovs.BridgeDatapath(qctx, bridge); err != nil {
		a.Error, a.Datapath, a.Found = err.Error(), "", false
		return a
	}
	// Asked with or without the bridge: OVS's own DPDK and PMD settings are checked either way.
	fctx, cancel := context.WithTimeout(ctx, ovsTimeout)
	defer cancel()
	if a.Facts, err = ovs.BridgeFacts(fctx, bridge); err != nil {
		a.FactsError, a.Facts = err.Error(), nil
	}
	return a
}

// WriteOVSAnswers replaces path with a, atomically (a reader sees the old file or the new one).
func WriteOVSAnswers(path string, a *OVSAnswers) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return fsutil.WriteAtomic(path, data, 0o644)
}

// OVSFile answers the node checks' OVS questions from the file the installer container writes.
type OVSFile struct {
	Path string
	// MaxAge is how old answers may be before they are reported stale (the installer's period
	// and some slack).
	MaxAge time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// BridgeDatapath implements OVS.
func (f *OVSFile) BridgeDatapath(_ context.Context, bridge string) (string, bool, error) {
	a, err := f.read(bridge)
	if err != nil {
		return "", false, err
	}
	if a.Error != "" {
		return "", false, fmt.Errorf("asked by the installer container at %s: %s", a.Asked.Format(time.RFC3339), a.Error)
	}
	return a.Datapath, a.Found, nil
}

// BridgeFacts implements OVS.
func (f *OVSFile) BridgeFacts(_ context.Context, bridge string) (*BridgeFacts, error) {
	a, err := f.read(bridge)
	switch {
	case err != nil:
		return nil, err
	case a.Error != "":
		return nil, errors.New(a.Error)
	case a.FactsError != "":
		return nil, errors.New(a.FactsError)
	case a.Facts == nil:
		return nil, fmt.Errorf("%s: no bridge facts", f.Path)
	}
	return a.Facts, nil
}

// Bounds of what a valid file holds: OVS names are short, errors are one line of ours.
var (
	reOVSName     = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,64}$`)
	reDatapath    = regexp.MustCompile(`^[a-z]{0,16}$`)
	reIfaceType   = regexp.MustCompile(`^[a-z0-9_]{0,32}$`)
	reState       = regexp.MustCompile(`^(up|down|)$`)
	reShortValue  = regexp.MustCompile(`^[A-Za-z0-9]{0,16}$`)
	maxErrLen     = 1024
	maxKernelPort = 4096
	maxUplinks    = 256
	// maxMaskLen is a pmd-cpu-mask of every CPU Linux can have, with "0x".
	maxMaskLen = 2 + 2048
)

// read loads, validates and dates the answers; every failure names the file and what to do.
func (f *OVSFile) read(bridge string) (*OVSAnswers, error) {
	fix := "check the installer container of the kube-fstack CNI DaemonSet (it asks OVS for the agent)"
	d, err := fsutil.OpenDir(filepath.Dir(f.Path))
	if err != nil {
		return nil, fmt.Errorf("OVS answers: %w; %s", err, fix)
	}
	defer d.Close()
	data, err := d.ReadFile(filepath.Base(f.Path), ovsAnswersLimit)
	if err != nil {
		return nil, fmt.Errorf("OVS answers: %w; %s", err, fix)
	}
	a := &OVSAnswers{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(a); err != nil {
		return nil, fmt.Errorf("OVS answers in %s are malformed: %w; %s", f.Path, err, fix)
	}
	if err := a.validate(bridge); err != nil {
		return nil, fmt.Errorf("OVS answers in %s: %w; %s", f.Path, err, fix)
	}
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	if age := now().Sub(a.Asked); age > f.MaxAge || age < -f.MaxAge {
		return nil, fmt.Errorf("OVS answers in %s are stale: asked at %s, %s ago (at most %s expected); %s",
			f.Path, a.Asked.Format(time.RFC3339), age.Round(time.Second), f.MaxAge, fix)
	}
	return a, nil
}

func (a *OVSAnswers) validate(bridge string) error {
	switch {
	case a.Version != OVSAnswersVersion:
		return fmt.Errorf("version %d, want %d (installer and agent of different releases?)", a.Version, OVSAnswersVersion)
	case a.Bridge != bridge:
		return fmt.Errorf("about bridge %q, want %q (installer and agent configured differently?)", a.Bridge, bridge)
	case len(a.Error) > maxErrLen || len(a.FactsError) > maxErrLen:
		return fmt.Errorf("an error longer than %d bytes", maxErrLen)
	case strings.IndexFunc(a.Error+a.FactsError, unicode.IsControl) >= 0:
		return errors.New("an error with control characters")
	case !reDatapath.MatchString(a.Datapath):
		return fmt.Errorf("datapath_type %q is not one OVS has", a.Datapath)
	case a.Facts == nil:
		return nil
	case len(a.Facts.KernelPorts) > maxKernelPort:
		return fmt.Errorf("%d kernel ports, at most %d expected", len(a.Facts.KernelPorts), maxKernelPort)
	case len(a.Facts.UserspaceTSO) > 16:
		return fmt.Errorf("userspace-tso-enable %q is not a boolean", a.Facts.UserspaceTSO)
	}
	for _, p := range a.Facts.KernelPorts {
		if !reOVSName.MatchString(p) {
			return fmt.Errorf("kernel port name %q is not an interface name", p)
		}
	}
	return a.Facts.validateSwitch()
}

// validateSwitch bounds the DPDK, PMD and uplink facts to what OVS writes; the mask's digits
// are judged by the PMD check, which names the setting.
func (f *BridgeFacts) validateSwitch() error {
	switch {
	case !reShortValue.MatchString(f.DPDKInit):
		return fmt.Errorf("dpdk-init %q is not a setting OVS takes", f.DPDKInit)
	case len(f.PMDCPUMask) > maxMaskLen || strings.IndexFunc(f.PMDCPUMask, func(r rune) bool { return r > unicode.MaxASCII || unicode.IsControl(r) }) >= 0:
		return fmt.Errorf("pmd-cpu-mask of %d bytes is not a CPU mask", len(f.PMDCPUMask))
	case len(f.Uplinks) > maxUplinks:
		return fmt.Errorf("%d uplinks, at most %d expected", len(f.Uplinks), maxUplinks)
	}
	for _, u := range f.Uplinks {
		switch {
		case !reOVSName.MatchString(u.Name):
			return fmt.Errorf("uplink name %q is not an interface name", u.Name)
		case !reIfaceType.MatchString(u.Type):
			return fmt.Errorf("uplink %s: type %q is not one OVS has", u.Name, u.Type)
		case !reState.MatchString(u.LinkState) || !reState.MatchString(u.AdminState):
			return fmt.Errorf("uplink %s: link state %q, admin state %q: want up or down", u.Name, u.LinkState, u.AdminState)
		case len(u.Error) > maxErrLen || strings.IndexFunc(u.Error, unicode.IsControl) >= 0:
			return fmt.Errorf("uplink %s: an error longer than %d bytes or with control characters", u.Name, maxErrLen)
		}
	}
	return nil
}
