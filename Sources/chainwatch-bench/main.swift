print("chainwatch-bench")
