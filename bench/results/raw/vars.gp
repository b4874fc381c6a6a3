ceil1 = 2.2385
ceil4 = 3.755
have_launch = 1
