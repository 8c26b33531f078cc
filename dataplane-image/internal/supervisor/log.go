package supervisor

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/kube-fstack/kube-fstack/internal/logging"
	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// readPodInfo reads one file of the downward-API volume, bounded. It follows symlinks, as the
// spec's reader does: the kubelet makes each file a link into its ..data directory, and the
// volume is the kubelet's, read-only in every container of the pod (a reader that refuses links,
// as the readers of pod-writable directories do, finds nothing there on a real node).
func readPodInfo(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxIdentity))
}

// maxIdentity bounds a podinfo file read for the log: a name or namespace has at most 253
// bytes, a StackInstance's name too.
const maxIdentity = 1024

// podIdentity is the pod's namespace, name and StackInstance, from the downward-API volume,
// for every line of the log: many pods' supervisors end up in one log store. A file missing
// or unreadable leaves its key out; the values are labels anyone who may edit the pod can
// change, so only the text up to the first control character is kept, and the log's own
// quoting keeps it one value.
func podIdentity(dir string) []any {
	if dir == "" {
		return nil
	}
	var out []any
	for _, f := range []struct{ file, key string }{
		{podcontract.PodInfoNamespace, logging.KeyNamespace},
		{podcontract.PodInfoName, logging.KeyPod},
		{podcontract.PodInfoStack, logging.KeyStack},
	} {
		b, err := readPodInfo(filepath.Join(dir, f.file))
		if err != nil {
			continue
		}
		v, _, _ := strings.Cut(string(b), "\n")
		if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
			v = v[:i]
		}
		if v != "" {
			out = append(out, f.key, v)
		}
	}
	return out
}
