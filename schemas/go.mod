module github.com/lethe-erasure/lethe/schemas

go 1.27.3
