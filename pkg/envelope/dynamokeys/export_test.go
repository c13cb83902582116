package dynamokeys

// SetScanPage makes Live read n items per Scan page, so that tests cross page boundaries.
func SetScanPage(s *Store, n int32) { s.page = n }
