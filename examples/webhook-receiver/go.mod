module github.com/lethe-erasure/lethe/examples/webhook-receiver

go 1.27.3
