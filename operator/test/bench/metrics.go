package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// samples are the series of one Prometheus text exposition, by name and label text
// (`name{a="1",b="2"}`).
type samples map[string]float64

// scrape reads a Prometheus text endpoint with c.
func scrape(c *http.Client, url string) (samples, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	s := samples{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			s[line[:i]] = v
		}
	}
	return s, nil
}

// sum adds every series of metric whose labels include all of labels (`k="v"` each).
func (s samples) sum(metric string, labels ...string) float64 {
	total := 0.0
	for series, v := range s {
		name, rest, _ := strings.Cut(series, "{")
		if name != metric {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(rest, l)
		}
		if all {
			total += v
		}
	}
	return total
}

// meanSince is the mean of histogram metric (in seconds) over the observations made between
// before and s, and how many there were.
func (s samples) meanSince(before samples, metric string, labels ...string) (mean float64, n int) {
	count := s.sum(metric+"_count", labels...) - before.sum(metric+"_count", labels...)
	if count == 0 {
		return 0, 0
	}
	return (s.sum(metric+"_sum", labels...) - before.sum(metric+"_sum", labels...)) / count, int(count)
}
