print("chainwatch")
