ceil1 = 3.8586
ceil4 = 4.671
have_launch = 1
