ceil1 = 1.0416
ceil4 = 0
have_launch = 0
