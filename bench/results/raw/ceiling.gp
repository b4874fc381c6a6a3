ceil1 = 0
ceil4 = 0
