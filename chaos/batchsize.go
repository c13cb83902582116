package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// batchTotals is, by deleter service, the subjects and the batches its instances handed
// their stores to erase (lethe_store_batch_subjects{op="erase"}), summed over instances.
type batchTotals map[string][2]float64

// eraseBatches scrapes every deleter instance's metrics. An instance that cannot be read
// is left out: the figure is a diagnosis, not a check.
func (s *System) eraseBatches(ctx context.Context) batchTotals {
	out := batchTotals{}
	cl := &http.Client{Timeout: 2 * time.Second}
	for _, svc := range sortedDeleters() {
		for _, p := range s.Instances(svc) {
			sum, n, err := scrapeEraseBatches(ctx, cl, p.Port)
			if err != nil {
				continue
			}
			t := out[svc]
			out[svc] = [2]float64{t[0] + sum, t[1] + n}
		}
	}
	return out
}

// means is the mean subjects per erase batch of each deleter from before to t; an
// instance started in between counts from zero, one stopped in between is not in t.
func (t batchTotals) means(before batchTotals) map[string]float64 {
	out := map[string]float64{}
	for svc, v := range t {
		if n := v[1] - before[svc][1]; n > 0 {
			out[svc] = (v[0] - before[svc][0]) / n
		}
	}
	return out
}

func scrapeEraseBatches(ctx context.Context, cl *http.Client, port int) (sum, count float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || !strings.Contains(rest, `op="erase"`) {
			continue
		}
		_, val, _ := strings.Cut(rest, "} ")
		v, perr := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if perr != nil {
			continue
		}
		switch name {
		case "lethe_store_batch_subjects_sum":
			sum += v
		case "lethe_store_batch_subjects_count":
			count += v
		}
	}
	return sum, count, sc.Err()
}

func formatMeans(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
