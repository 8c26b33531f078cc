package cli

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// BugReportIndex is the archive's index.json (README.md says the same for people): what was
// collected, what could not be and why, and the bounds it was collected under.
type BugReportIndex struct {
	metav1.TypeMeta `json:",inline"`
	// Created is when the collection started (UTC); the archive's root folder is named after it.
	Created time.Time `json:"created"`
	// Plugin is the version of the kubectl-fstack that collected it.
	Plugin string `json:"plugin"`
	// Scope says which StackInstances were asked for (-n/-A, -l, names).
	Scope  string          `json:"scope"`
	Limits BugReportLimits `json:"limits"`
	// Files are the files collected, in the order they were written.
	Files []BugReportFile `json:"files"`
	// Missing are the items that could not be collected, each with the reason.
	Missing []BugReportMissing `json:"missing"`
}

// BugReportLimits are the bounds the report was collected under.
type BugReportLimits struct {
	// LogLines is --max-log-lines: each log is its container's last LogLines lines at most.
	LogLines int64 `json:"logLines"`
	// FileBytes is --max-file-size: no file is larger (a log keeps its end, any other file its start).
	FileBytes int64 `json:"fileBytes"`
	// TotalBytes is --max-size: the archive's files, as tar holds them, take no more.
	TotalBytes int64 `json:"totalBytes"`
}

// BugReportFile is one file of the archive.
type BugReportFile struct {
	// Path is the file's path under the archive's root folder.
	Path string `json:"path"`
	// What says what the file holds.
	What  string `json:"what"`
	Bytes int64  `json:"bytes"`
	// Truncated says how the file was cut to the bounds, when it was.
	Truncated string `json:"truncated,omitempty"`
}

// BugReportMissing is an item that could not be collected.
type BugReportMissing struct {
	What string `json:"what"`
	// Path is where the file would have been.
	Path   string `json:"path,omitempty"`
	Reason string `json:"reason"`
}

// maxReason bounds a reason's text: an API server's or a pod's error quotes what it was sent.
const maxReason = 1000

// tarBlock is tar's unit: each file takes a header block and its data rounded up to blocks.
const tarBlock = 512

// indexReserve is the part of --max-size kept for README.md and index.json, which are written
// last and list everything else.
func indexReserve(total int64) int64 { return min(total/4, 1<<20) }

// bugArchive writes the report as a gzipped tar into a temporary file beside the output, renamed
// to the output once complete: an interrupted or failed report leaves no half archive under the
// name a user would attach.
type bugArchive struct {
	out, tmp string
	f        *os.File
	gz       *gzip.Writer
	tw       *tar.Writer
	root     string
	modTime  time.Time
	limits   BugReportLimits
	written  int64
	redact   *redactor
	index    BugReportIndex
	// err is the first write error: the archive is then lost, and every later add does nothing.
	err error
}

func createArchive(out, root string, limits BugReportLimits, created time.Time) (*bugArchive, error) {
	f, err := os.CreateTemp(filepath.Dir(out), ".kube-fstack-bug-report-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("--output %s: %w", out, err)
	}
	gz := gzip.NewWriter(f)
	a := &bugArchive{out: out, tmp: f.Name(), f: f, gz: gz, tw: tar.NewWriter(gz), root: root, modTime: created, limits: limits,
		redact: newRedactor()}
	a.index = BugReportIndex{TypeMeta: metav1.TypeMeta{APIVersion: OutputGroupVersion.String(), Kind: "BugReportIndex"},
		Created: created, Plugin: Version, Limits: limits, Files: []BugReportFile{}, Missing: []BugReportMissing{}}
	return a, nil
}

// add writes one file: scrubbed, cut to --max-file-size (keeping its start), or left out with
// the reason when it does not fit in what --max-size leaves.
func (a *bugArchive) add(name, what string, data []byte) {
	a.addCut(name, what, data, "", false)
}

// addLog writes a log as add writes a file, but a log too large keeps its end: its newest lines.
// truncated says how the caller already cut it.
// (tailLog cut it already, but scrubbing can lengthen it: a short value becomes REDACTED.)
func (a *bugArchive) addLog(name, what string, data []byte, truncated string) {
	a.addCut(name, what, data, truncated, true)
}

func (a *bugArchive) addCut(name, what string, data []byte, truncated string, keepEnd bool) {
	if a.err != nil {
		return
	}
	data = a.redact.scrub(data)
	if n := int64(len(data)); n > a.limits.FileBytes {
		if keepEnd {
			truncated = joinNotes(truncated, fmt.Sprintf("cut to its last %s of %s (--max-file-size)", byteSize(a.limits.FileBytes), byteSize(n)))
			data = data[n-a.limits.FileBytes:]
		} else {
			truncated = joinNotes(truncated, fmt.Sprintf("cut to its first %s of %s (--max-file-size)", byteSize(a.limits.FileBytes), byteSize(n)))
			data = data[:a.limits.FileBytes]
		}
	}
	if a.written+tarSize(len(data)) > a.limits.TotalBytes-indexReserve(a.limits.TotalBytes) {
		a.fail(name, what, fmt.Errorf("the archive reached --max-size %s: give a larger --max-size, or fewer stacks (-l, STACK)", byteSize(a.limits.TotalBytes)))
		return
	}
	if err := a.write(name, data); err != nil {
		a.err = err
		return
	}
	a.index.Files = append(a.index.Files, BugReportFile{Path: name, What: what, Bytes: int64(len(data)), Truncated: truncated})
}

// fail records an item that could not be collected, and why.
func (a *bugArchive) fail(name, what string, err error) {
	reason := string(a.redact.scrub([]byte(podcontract.Clip(err.Error(), maxReason))))
	a.index.Missing = append(a.index.Missing, BugReportMissing{What: what, Path: name, Reason: reason})
}

func (a *bugArchive) write(name string, data []byte) error {
	h := &tar.Header{Typeflag: tar.TypeReg, Name: path.Join(a.root, name), Mode: 0o644, Size: int64(len(data)), ModTime: a.modTime, Format: tar.FormatPAX}
	if err := a.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("write %s: %w", a.tmp, err)
	}
	if _, err := a.tw.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", a.tmp, err)
	}
	a.written += tarSize(len(data))
	return nil
}

// finish writes README.md and index.json, closes the archive and renames it to the output.
func (a *bugArchive) finish() error {
	if a.err != nil {
		return a.err
	}
	raw, err := jsonIndent(&a.index)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"README.md", a.readme()}, {"index.json", raw}} {
		if err := a.write(f.name, a.redact.scrub(f.data)); err != nil {
			return err
		}
	}
	if err := errors.Join(a.tw.Close(), a.gz.Close()); err != nil {
		return fmt.Errorf("write %s: %w", a.tmp, err)
	}
	if err := a.f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", a.tmp, err)
	}
	if err := os.Rename(a.tmp, a.out); err != nil {
		return fmt.Errorf("--output %s: %w", a.out, err)
	}
	a.f = nil
	return nil
}

// abort removes the temporary file of an archive that was not finished.
func (a *bugArchive) abort() {
	if a.f != nil {
		_ = a.f.Close()
		_ = os.Remove(a.tmp)
		a.f = nil
	}
}

func tarSize(n int) int64 {
	return tarBlock + (int64(n)+tarBlock-1)/tarBlock*tarBlock
}

func joinNotes(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// byteSize prints n as --max-size takes it: 1Ti, 100Mi, 512Ki, or bytes.
func byteSize(n int64) string {
	switch {
	case n >= 1<<40 && n%(1<<40) == 0:
		return fmt.Sprintf("%dTi", n>>40)
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGi", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMi", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKi", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// safePathPart makes a name from the cluster a path component: object names are DNS names
// already, but the archive's paths are no place to find out that one was not.
var unsafePathRune = regexp.MustCompile(`[^A-Za-z0-9._-]`)

func safePathPart(s string) string {
	s = unsafePathRune.ReplaceAllString(s, "_")
	if s == "" || s == "." || s == ".." {
		return "_" + s
	}
	return s
}

// archivePath joins the parts of a path in the archive, each made safe.
func archivePath(parts ...string) string {
	for i := range parts {
		parts[i] = safePathPart(parts[i])
	}
	return path.Join(parts...)
}
