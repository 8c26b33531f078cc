package inject

import (
	"regexp"
	"strings"
)

// The image reference grammar the container runtimes resolve (the distribution project's
// reference grammar), written out here because the module carries no parser for it: an
// allow-list compared on the text would let "registry.example" admit
// "registry.example:31337/x" (another registry, on another port) or
// "registry.example.evil/x", and "fstack/dp" would not be seen as docker.io/fstack/dp.

// imageRef is a parsed reference: registry host (with its port), repository path, tag, digest.
type imageRef struct {
	domain, path, tag, digest string
}

var (
	reDomain        = regexp.MustCompile(`^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?$`)
	rePathComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	reTag           = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)
	reDigest        = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$`)
)

const (
	dockerHub     = "docker.io"
	dockerLibrary = "library/"
	// maxRepoName is the grammar's limit on the name (registry and path).
	maxRepoName = 255
)

// parseImageRef parses s as the runtimes do: the first path component is the registry when it
// has a '.' or ':', is localhost or has an upper-case letter; otherwise the registry is Docker
// Hub, where a one-component path is an official image under library/.
func parseImageRef(s string) (imageRef, bool) {
	var r imageRef
	name := s
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name, r.digest = name[:i], name[i+1:]
		if !reDigest.MatchString(r.digest) {
			return r, false
		}
	}
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name, r.tag = name[:i], name[i+1:]
		if !reTag.MatchString(r.tag) {
			return r, false
		}
	}
	if name == "" || len(name) > maxRepoName {
		return r, false
	}
	r.domain, r.path = splitDomain(name)
	if !reDomain.MatchString(r.domain) || !validPath(r.path) {
		return r, false
	}
	return r, true
}

func splitDomain(name string) (domain, path string) {
	i := strings.IndexByte(name, '/')
	if i < 0 || (!strings.ContainsAny(name[:i], ".:") && name[:i] != "localhost" && strings.ToLower(name[:i]) == name[:i]) {
		domain, path = dockerHub, name
	} else {
		domain, path = name[:i], name[i+1:]
	}
	if domain == "index.docker.io" {
		domain = dockerHub
	}
	if domain == dockerHub && !strings.Contains(path, "/") {
		path = dockerLibrary + path
	}
	return domain, path
}

func validPath(path string) bool {
	for _, c := range strings.Split(path, "/") {
		if !rePathComponent.MatchString(c) {
			return false
		}
	}
	return true
}

// imagePattern is one entry of --allowed-dataplane-images: a registry host, spelled exactly
// (port included), then optionally a repository path. A path ending in '/' admits every
// repository under it; one without admits that repository (and those under it); one with a tag
// or digest admits exactly that image.
type imagePattern struct {
	domain, path, tag, digest string
	under                     bool // path ends at a '/': any repository below it
}

// parseImagePattern reads an allow-list entry. Its first component is always the registry (an
// entry must name it: "docker.io/library/" for Docker Hub's official images).
func parseImagePattern(s string) (imagePattern, bool) {
	host, rest, _ := strings.Cut(s, "/")
	p := imagePattern{domain: strings.ToLower(host)}
	if p.domain == "index.docker.io" {
		p.domain = dockerHub
	}
	if !reDomain.MatchString(host) {
		return p, false
	}
	if rest == "" {
		return p, true
	}
	if strings.HasSuffix(rest, "/") {
		p.path, p.under = strings.TrimSuffix(rest, "/"), true
		return p, validPath(p.path)
	}
	ref, ok := parseImageRef(host + "/" + rest)
	p.path, p.tag, p.digest = ref.path, ref.tag, ref.digest
	return p, ok && ref.domain == p.domain
}

// admits says whether r is under p.
func (p imagePattern) admits(r imageRef) bool {
	switch {
	case strings.ToLower(r.domain) != p.domain:
		return false
	case p.path == "":
		return true
	case p.under:
		return strings.HasPrefix(r.path, p.path+"/")
	case p.tag != "" || p.digest != "":
		return r.path == p.path && r.tag == p.tag && r.digest == p.digest
	}
	return r.path == p.path || strings.HasPrefix(r.path, p.path+"/")
}
